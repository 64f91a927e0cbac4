{0, 0x9ae16a3b2f90404full},
