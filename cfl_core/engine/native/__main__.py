"""`python -m cfl_core.engine.native`: build the training kernel now (make install does) and say which path trains."""
from . import status

print(f"CFL Lab dense-model training on the CPU: {status()}")
