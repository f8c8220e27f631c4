def logged(func):
    def wrapper(*args):
        return func(*args)
    return wrapper


def repeat(n):
    def deco(func):
        return func
    return deco


@logged
def hello():
    pass


@repeat(2)
def world():
    pass


hello()
world()
