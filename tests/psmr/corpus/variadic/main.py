def alpha():
    return "a"


def beta():
    return "b"


def gamma(value):
    return value


def run_all(*tasks):
    for task in tasks:
        task()


def call_with(fn, *args, **kwargs):
    return fn(*args, **kwargs)


class Missing(Exception):
    def hint(self):
        return "missing"


class Broken(Exception):
    def hint(self):
        return "broken"


def guarded():
    try:
        run_all(alpha, beta)
    except (Missing, Broken) as exc:
        return exc.hint()
    return call_with(gamma, 1)


guarded()
