def first():
    return 1


def second():
    return 2


def third():
    return 3


PIPELINE = [first, second]
ROUTES = {"a": first, "b": second}


def pick():
    PIPELINE[0]()
    ROUTES.get("b")()
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
