"""Crazyflie target: the exported policy as C code in an out-of-tree crazyflie-firmware controller.

``graph`` lowers the ONNX graph, ``c_model``/``c_contract``/``c_controller`` write the C,
``codegen.generate_project`` writes the project, ``host`` compiles it for parity checks,
``size`` cross-compiles it for the STM32F405 and checks the budget, ``cost`` estimates the
on-MCU time, ``flash`` flashes the built firmware through cflib. CLI verbs: ``export-c``, ``flash``.
"""
