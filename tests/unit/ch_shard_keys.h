(void)a; (void)h;
