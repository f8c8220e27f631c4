def tool():
    return "tool"
