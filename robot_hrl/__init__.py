"""robot_hrl: the on-robot and ground-station side of the stack.

numpy, onnxruntime, opencv and a transport only. It never imports torch, ``sim`` or
``deploy`` (tests/test_import_rules.py enforces it).
"""

__version__ = "0.1.0"
