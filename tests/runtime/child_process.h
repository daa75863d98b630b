// Runs a small OpenCL application in a child process, for the settings ManyCL reads once per
// process (MANYCL_DEVICES, MANYCL_LOG, ...), and collects what it printed.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace rt_test {

struct ChildRun {
  std::string out;                     // all of stdout
  std::string err;                     // all of stderr
  std::vector<std::string> manycl_err; // the stderr lines starting with "ManyCL:"
};

// Runs `command` (shell words, e.g. "env -u X VAR=value /path/probe") and waits for it.
inline ChildRun run_child(const std::string &command) {
  namespace fs = std::filesystem;
  const fs::path err_file =
      fs::temp_directory_path() / ("manycl_child_err_" + std::to_string(getpid()));
  ChildRun r;
  if (FILE *p = popen((command + " 2>" + err_file.string()).c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p))
      r.out += buf;
    pclose(p);
  }
  std::ifstream in(err_file);
  std::string line;
  while (std::getline(in, line)) {
    r.err += line + "\n";
    if (line.rfind("ManyCL:", 0) == 0)
      r.manycl_err.push_back(line);
  }
  fs::remove(err_file);
  return r;
}

} // namespace rt_test
