# Rewritten by make_wheel.py with the version of the command it packages.
__version__ = "0+unknown"
