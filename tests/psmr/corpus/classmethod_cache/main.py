from functools import lru_cache


def auto_repr(cls):
    cls.__repr__ = lambda self: cls.__name__
    return cls


@auto_repr
class Color:
    def __init__(self, name):
        self.name = name

    @classmethod
    @lru_cache(maxsize=64)
    def parse(cls, text):
        return cls(text.strip())


@auto_repr
class Style:
    def __init__(self, color=None):
        self.color = color

    @classmethod
    @lru_cache(maxsize=64)
    def parse(cls, text):
        color = Color.parse(text)
        return cls(color)

    @classmethod
    def normalize(cls, text):
        return cls.parse(text.lower())


Style.normalize("Red")
