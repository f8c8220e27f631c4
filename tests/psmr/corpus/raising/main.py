class NotReady(Exception):
    def __init__(self):
        self.reason = "not ready"


class Failed(Exception):
    def __init__(self, code):
        self.code = code


class Timeout(Failed):
    pass


def check(flag):
    if flag:
        raise NotReady
    raise Failed(2) from None


def expire():
    raise Timeout(3)


def guarded():
    try:
        check(False)
    except Failed as exc:
        raise RuntimeError(exc.code) from exc


def reraise():
    try:
        expire()
    except Timeout:
        raise


guarded()
reraise()
