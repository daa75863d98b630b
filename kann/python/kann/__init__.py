"""kann: compile ONNX models for ManyCL accelerators and run them from NumPy.

    import kann
    session = kann.Session(kann.compile("model.onnx", clusters=1))
    (logits,) = session.run(None, {"input": x})

`kann.compile(model, clusters=None, precision="fp32", calibration=None, device_config="mppa3",
calibration_percentile=100.0, batch=None, batch_split="auto", schedule="auto")` returns a `kann.Network` (`save(path)`, `kann.load(path)`,
`inputs`, `outputs`, `clusters`, `report`). `kann.Session(network, device=0, sub_device=None)`
loads it on a ManyCL device (an index of MANYCL_DEVICES) or on sub-device k of that device cut
into sub-devices of the network's cluster count; `run(output_names, input_feed)` follows ONNX
Runtime's convention and leaves the timings of that call in `host_seconds`,
`modeled_seconds`, `modeled_cycles`. Failures raise `kann.Error` (a RuntimeError); wrong names,
shapes and arguments raise ValueError / TypeError. `kann.load_custom_ops(path)` loads a
custom-operator library (docs/kann.md, "Custom operators") for compile() and Session. The device runs without the GIL, so sessions
on different sub-devices run concurrently from Python threads.
"""
import json as _json

from ._kann import Error, Network, Session, TensorInfo, __version__, compile, load, load_custom_ops

__all__ = ["Error", "Network", "Session", "TensorInfo", "compile", "load", "load_custom_ops",
           "__version__"]


def _report(network):
    """The compile report (operators, splits, SPM use, modeled cycles) as a dict, or None."""
    return _json.loads(network.report_json) if network.report_json else None


Network.report = property(_report, doc=_report.__doc__)
for _name in __all__[:-3]:  # kann.Error, not kann._kann.Error, in messages and reprs
    globals()[_name].__module__ = "kann"
