def outer():
    def inner():
        return helper()
    return inner()


def helper():
    return 1


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


outer()
fact(3)
