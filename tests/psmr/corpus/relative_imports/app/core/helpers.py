def assist():
    return "assist"


def other():
    return "other"
