def key(x):
    return -x


nums = [3, 1, 2]
print(len(nums))
sorted(nums, key=key)
list(map(str, nums))
