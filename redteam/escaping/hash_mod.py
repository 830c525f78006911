"""A function whose outputs raise, with control characters in the message, when the auditor keys them."""

from dpharness import AddRemove, PureDP, register


class Out:
    def __init__(self, v):
        self.v = v

    def __hash__(self):
        raise ValueError(f"record {self.v}\x00\x1b[32m]]>\nPASS  forged")

    def __eq__(self, other):
        raise ValueError(f"record {self.v}\x00\x1b[32m]]>\nPASS  forged")


def hash_raises(data, size, rng):
    return [Out(int(x)) for x in rng.integers(0, 2, size)]


register(hash_raises, name="hash_raises", data=[1, 2, 3], neighbor=[1, 2], relation=AddRemove(), claim=PureDP(1.0))
