print("cuff")
