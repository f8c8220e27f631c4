def low():
    return 1


def high():
    return 2


def rank(fn):
    return fn.__name__


def positive(n):
    return n > 0


def loudest():
    return max([low, high], key=rank)


def quietest():
    return min(low, high, key=rank)


def order():
    return sorted([high, low], key=rank)


def keep():
    return list(filter(positive, [1, -1]))


def smallest():
    return min([3, 1], default=None)


loudest()
quietest()
order()
keep()
smallest()
