import sys

from traingrid_trainer.train import main

sys.exit(main())
