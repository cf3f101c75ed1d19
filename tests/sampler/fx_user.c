/* A user binary for test_session: its .text is what the fake guest runs, and --user-dir finds
 * it by the hash of that .text. Freestanding, so that its bytes depend on this file only. */
static volatile unsigned long counter;

void spin(void)
{
    for (;;)
        counter++;
}

void _start(void)
{
    spin();
}
