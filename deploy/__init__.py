"""Deployment side: ONNX export, Crazyflie C code and flashing, Jetson/TensorRT. Imports robot_hrl and sim."""
