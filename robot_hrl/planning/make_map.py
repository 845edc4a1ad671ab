"""``python -m robot_hrl.planning.make_map --world WORLD --out MAP.yaml``: rasterize a world into a map_server map."""

import sys

from robot_hrl.planning.maps import main

if __name__ == "__main__":
    sys.exit(main())
