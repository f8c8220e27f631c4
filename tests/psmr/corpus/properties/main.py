import functools


class Sensor:
    def read(self):
        return 21.0


class Temperature:
    def __init__(self):
        self._celsius = 0.0

    @property
    def celsius(self):
        return self._celsius

    @celsius.setter
    def celsius(self, value):
        self._celsius = value

    @property
    def fahrenheit(self):
        return self.celsius * 9 / 5 + 32

    @functools.cached_property
    def sensor(self):
        return Sensor()

    def refresh(self):
        self.celsius = self.sensor.read()


def report():
    t = Temperature()
    t.celsius = 20
    t.refresh()
    return t.fahrenheit


print(report())
