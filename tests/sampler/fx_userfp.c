/* A user binary with frame pointers and no unwind tables (as a teaching OS builds its programs),
 * for test_session's frame-pointer walk: spin is the leaf, called from _start. -O0 keeps both
 * frame records where the test lays them out. */
static volatile unsigned long counter;

__attribute__((noinline)) void spin(void)
{
    for (;;)
        counter++;
}

void _start(void)
{
    spin();
}
