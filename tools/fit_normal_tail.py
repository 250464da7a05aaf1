"""The coefficients of common/activation.glsl's normal_tail: the standard normal
distribution's upper tail Q(a) = exp(-a^2/2) R(a), R a polynomial of degree 10 in
t = (a - 4) / (a + 4), fitted to R's values (mpmath, 40 digits) at 1200 Chebyshev nodes
in t on [-1, 0.999] by weighted least squares on the relative error, the weights
reweighted 60 times towards equal ripple (Lawson's iteration). Prints the coefficients
rounded to float32, highest degree first, and their relative error over a in [0, 8].

    python3 tools/fit_normal_tail.py        (Debian: python3-numpy, python3-mpmath)
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
K, DEG, NODES = 4.0, 10, 1200


def r_exact(a):
    a = mp.mpf(a)
    return 0.5 * mp.erfc(a / mp.sqrt(2)) * mp.exp(a * a / 2)


def fit():
    k = np.arange(NODES)
    t = -1 + (np.cos(np.pi * (k + 0.5) / NODES) + 1) / 2 * 1.999
    r = np.array([float(r_exact(K * (1 + x) / (1 - x))) for x in t])
    v = np.vander(t, DEG + 1) / r[:, None]
    w = np.ones(NODES)
    for _ in range(60):
        c, *_ = np.linalg.lstsq(v * w[:, None], w, rcond=None)
        e = np.abs(v @ c - 1)
        w = w * np.sqrt(e / e.max()) + 1e-12
        w /= w.max()
    return c


c = fit().astype(np.float32)
a = np.linspace(0, 8, 4001)
t = (a - K) / (a + K)
err = np.max(np.abs(np.polyval(c.astype(np.float64), t) / [float(r_exact(x)) for x in a] - 1))
print(", ".join("%.9g" % x for x in c))
print("relative error over [0, 8]: %.3g" % err)
