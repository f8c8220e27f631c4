def first():
    return 1


def second():
    return 2


def third():
    return 3


def fourth():
    return 4


def fifth():
    return 5


PIPELINE = [first, second]
ROUTES = {"a": first, "b": second}
HOOKS = {"x": fourth, "y": fifth}


def pick():
    PIPELINE[0]()
    HOOKS.get("x")()
    handler = callback = third
    callback()
    if (found := ROUTES["a"]) is not None:
        found()
    return handler


def late():
    from json import dumps

    return dumps({})


pick()
late()
