#!/usr/bin/python3
"""Checks ONNX files with onnx.checker (full_check: shapes inferred too).

kiln's tests run it on the models kiln export writes when /usr/bin/python3
has the onnx package; CI has not, and skips it.

    /usr/bin/python3 tests/onnx/check.py MODEL.onnx...
"""
import sys

import onnx

for path in sys.argv[1:]:
    onnx.checker.check_model(onnx.load(path), full_check=True)
    print(path, "ok")
