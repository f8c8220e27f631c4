def a():
    pass


def b():
    pass


funcs = [a]
funcs.append(b)
funcs[0]()
for f in funcs:
    f()
