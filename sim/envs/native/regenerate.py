"""Write the generated C of the default configuration to ``sim/envs/native/generated/`` (for review).

    python -m sim.envs.native.regenerate

tests/test_sim_native.py regenerates these files and fails when they differ from the committed ones:
run this after changing the actuator chain, the layout table or the defaults, and commit the result.
"""

from sim.envs.native.codegen import write_generated

if __name__ == "__main__":
    for path in write_generated():
        print(f"wrote {path}")
