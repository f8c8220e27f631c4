class Node:
    def __init__(self, text):
        self.text = text

    def render(self, max_width=80):
        return self.text[:max_width]


class Console:
    def render(self, renderable, options):
        return [renderable, options]


class Layout:
    def render(self, console, options):
        return [console, options]


def traverse(obj):
    return Node(repr(obj))


def pretty(obj, max_width=80):
    if isinstance(obj, Node):
        node = obj
    else:
        node = traverse(obj)
    return node.render(max_width=max_width)


def draw(target, thing):
    return target.render(thing, {})


pretty(Console())
pretty(Layout())
pretty(Node("x"))
draw(Console(), 1)
