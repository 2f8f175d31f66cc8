#!/usr/bin/python3
"""Writes the NumPy golden files of frontends/npy and frontends/dataset.

Run from the repository root with /usr/bin/python3 (numpy 1.24); the outputs
are committed and tests read them, so CI never runs Python:

    /usr/bin/python3 tests/npy/write.py
"""
import json
import os

import numpy as np

OUT = "frontends/npy/testdata"
DATA = "frontends/dataset/testdata"


def arrays():
    """The arrays every format round-trips: name -> array."""
    x = np.arange(12, dtype=np.float64).reshape(4, 3) * 0.5 - 1.25
    return {
        "f4_2x3": (np.arange(6, dtype=np.float32).reshape(2, 3) / 3).astype("<f4"),
        "f8_vec": np.array([1e-300, -2.5, np.pi, 1e300], dtype="<f8"),
        "i4_3x2": np.array([[-2147483648, 7], [0, 2147483647], [-1, 2]], dtype="<i4"),
        "i8_vec": np.array([-(2**53), 0, 5, 2**53], dtype="<i8"),
        "b1_2x2": np.array([[True, False], [False, True]]),
        "f8_scalar": np.array(4.25, dtype="<f8"),
        "f4_empty": np.zeros((0, 3), dtype="<f4"),
        "f8_4x3": x,
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(DATA, exist_ok=True)
    golden = {}
    for name, a in arrays().items():
        np.save(os.path.join(OUT, name + ".npy"), a)
        golden[name] = {"shape": list(a.shape), "values": [float(v) for v in a.ravel()]}
    a = arrays()["f8_4x3"]
    for v in [(2, 0), (3, 0)]:
        with open(os.path.join(OUT, "f8_4x3_v%d.npy" % v[0]), "wb") as f:
            np.lib.format.write_array(f, a, version=v)
    # Files kiln refuses.
    np.save(os.path.join(OUT, "bad_fortran.npy"), np.asfortranarray(a))
    np.save(os.path.join(OUT, "bad_bigendian.npy"), a.astype(">f4"))
    np.save(os.path.join(OUT, "bad_u1.npy"), np.arange(4, dtype=np.uint8))
    # Archives: stored and deflated.
    np.savez(os.path.join(OUT, "stored.npz"), x=a, y=np.array([0, 2, 1, 2], dtype=np.int64))
    np.savez_compressed(os.path.join(OUT, "deflated.npz"), x=a, y=np.array([0, 2, 1, 2], dtype=np.int64))
    with open(os.path.join(OUT, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")

    # Training data for frontends/dataset's array tests: 6 examples of 2x2
    # float32 features, int64 labels and float64 targets.
    feats = (np.arange(24, dtype=np.float32).reshape(6, 2, 2) - 11) / 4
    np.savez(os.path.join(DATA, "train.npz"), x=feats, y=np.array([0, 1, 2, 0, 1, 2], dtype=np.int64),
             r=np.linspace(-1, 1, 6), tok=np.arange(12, dtype=np.int32).reshape(6, 2) % 5)


if __name__ == "__main__":
    main()
