import functools


def logged(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def timed(func):
    def inner(*args):
        return func(*args)

    return inner


def repeat(times):
    def decorate(func):
        def run(*args):
            for _ in range(times):
                func(*args)

        return run

    return decorate


@logged
@timed
def work(x):
    return x


@repeat(2)
@timed
def ping():
    pass


work(1)
ping()
