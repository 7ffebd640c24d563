"""placeholder"""

CASES = []
