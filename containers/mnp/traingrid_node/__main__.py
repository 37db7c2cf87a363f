"""``python3 -m traingrid_node [training command...]``"""

import sys

from traingrid_node.node import main

sys.exit(main())
