print("dpctl: under construction")
