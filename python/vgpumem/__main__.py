"""``python -m vgpumem ...`` and the ``vgpumem`` script: the packaged command, as is."""

import os
import sys

from vgpumem._layout import command_path


def main() -> None:
    command = str(command_path())
    # Replace this interpreter: the program run under vgpumem gets its
    # signals and its exit status straight, as with the command itself.
    os.execv(command, ["vgpumem", *sys.argv[1:]])


if __name__ == "__main__":
    main()
