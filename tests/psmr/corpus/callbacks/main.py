def on_click():
    return "click"


def on_key():
    return "key"


def fallback():
    return "fallback"


class Button:
    default = staticmethod(fallback)

    def __init__(self, handler=None):
        self.handler = handler or self.default

    def press(self):
        return self.handler()


class Keyboard:
    hooks = [on_key]

    def type(self):
        for hook in self.hooks:
            hook()


class Form:
    def __init__(self):
        self.submit = Button(on_click)

    def send(self):
        return self.submit.press()


Form().send()
Button().press()
Keyboard().type()
