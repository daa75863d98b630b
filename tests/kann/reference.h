// Straightforward NCHW reference operators for end-to-end checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace kann::test::ref {

struct T {
  int C = 0, H = 0, W = 0;
  std::vector<float> v; // NCHW
  float &at(int c, int y, int x) { return v[(size_t(c) * H + y) * W + x]; }
  float at(int c, int y, int x) const { return v[(size_t(c) * H + y) * W + x]; }
};

inline T make(int C, int H, int W) {
  return T{C, H, W, std::vector<float>(size_t(C) * H * W)};
}

inline T conv(const T &x, const std::vector<float> &w, const std::vector<float> &b, int M, int k,
              int stride, int pad) {
  const int OH = (x.H + 2 * pad - k) / stride + 1, OW = (x.W + 2 * pad - k) / stride + 1;
  T y = make(M, OH, OW);
  for (int m = 0; m < M; ++m)
    for (int oy = 0; oy < OH; ++oy)
      for (int ox = 0; ox < OW; ++ox) {
        double acc = b.empty() ? 0.0 : b[m];
        for (int c = 0; c < x.C; ++c)
          for (int ky = 0; ky < k; ++ky)
            for (int kx = 0; kx < k; ++kx) {
              int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
              if (iy < 0 || ix < 0 || iy >= x.H || ix >= x.W)
                continue;
              acc += double(x.at(c, iy, ix)) * w[((size_t(m) * x.C + c) * k + ky) * k + kx];
            }
        y.at(m, oy, ox) = float(acc);
      }
  return y;
}

inline T batchnorm(T x, const std::vector<float> &g, const std::vector<float> &b,
                   const std::vector<float> &mean, const std::vector<float> &var, float eps) {
  for (int c = 0; c < x.C; ++c)
    for (int i = 0; i < x.H * x.W; ++i) {
      float &v = x.v[size_t(c) * x.H * x.W + i];
      v = (v - mean[c]) / std::sqrt(var[c] + eps) * g[c] + b[c];
    }
  return x;
}

inline T relu(T x) {
  for (float &v : x.v)
    v = std::max(v, 0.0f);
  return x;
}

inline T add(T a, const T &b) {
  for (size_t i = 0; i < a.v.size(); ++i)
    a.v[i] += b.v[i];
  return a;
}

inline T pool(const T &x, int k, int stride, int pad, bool max, bool count_include_pad) {
  const int OH = (x.H + 2 * pad - k) / stride + 1, OW = (x.W + 2 * pad - k) / stride + 1;
  T y = make(x.C, OH, OW);
  for (int c = 0; c < x.C; ++c)
    for (int oy = 0; oy < OH; ++oy)
      for (int ox = 0; ox < OW; ++ox) {
        double acc = max ? -1e30 : 0.0;
        int n = 0;
        for (int ky = 0; ky < k; ++ky)
          for (int kx = 0; kx < k; ++kx) {
            int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
            if (iy < 0 || ix < 0 || iy >= x.H || ix >= x.W) {
              n += count_include_pad;
              continue;
            }
            acc = max ? std::max(acc, double(x.at(c, iy, ix))) : acc + x.at(c, iy, ix);
            ++n;
          }
        y.at(c, oy, ox) = float(max ? acc : acc / n);
      }
  return y;
}

inline T global_avg(const T &x) {
  T y = make(x.C, 1, 1);
  for (int c = 0; c < x.C; ++c) {
    double s = 0;
    for (int i = 0; i < x.H * x.W; ++i)
      s += x.v[size_t(c) * x.H * x.W + i];
    y.v[c] = float(s / (x.H * x.W));
  }
  return y;
}

// y = x (flattened NCHW) * W^T + b with W [N][K].
inline std::vector<float> gemm(const std::vector<float> &x, const std::vector<float> &w,
                               const std::vector<float> &b, int N) {
  const size_t K = x.size();
  std::vector<float> y(N);
  for (int n = 0; n < N; ++n) {
    double acc = b[n];
    for (size_t k = 0; k < K; ++k)
      acc += double(x[k]) * w[n * K + k];
    y[n] = float(acc);
  }
  return y;
}

inline std::vector<float> softmax(std::vector<float> x) {
  float m = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (float &v : x)
    s += (v = std::exp(v - m));
  for (float &v : x)
    v = float(v / s);
  return x;
}

} // namespace kann::test::ref
