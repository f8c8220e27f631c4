def helper():
    return 1


def _private():
    pass
