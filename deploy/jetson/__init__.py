"""Jetson and other GPU computers: a TensorRT engine built and cached through onnxruntime's
TensorRT execution provider, and a latency benchmark. Provider choice and fallback are the
runtime's (``robot_hrl.runtime.providers``); this package adds the engine cache handling, the
environment report and the ``robot-hrl jetson build|bench`` verb."""
