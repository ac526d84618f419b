"""Argument checks shared by the bench/ drivers."""
import argparse
import os
import shutil


def at_least(lo):
    """An argparse type: an integer >= lo, with a message naming the value otherwise."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'{text!r}: expected an integer')
        if v < lo:
            raise argparse.ArgumentTypeError(f'{text!r}: expected an integer >= {lo}')
        return v
    return parse


def program(text):
    """An argparse type: a program given by path or by a name on PATH (python3), as the path
    to run; a message naming what was looked for otherwise."""
    path = shutil.which(text)
    if path is None:
        where = 'at that path' if os.sep in text else 'of that name on PATH'
        raise argparse.ArgumentTypeError(f'{text!r}: no executable program {where}')
    return path
