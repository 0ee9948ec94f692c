print("mediafetch")
