"""Argument checks shared by the bench/ drivers."""
import argparse


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
