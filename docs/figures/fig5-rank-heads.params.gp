dims = "4 8"
