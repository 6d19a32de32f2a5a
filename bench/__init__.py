"""`python -m bench` (`make bench`): fire lateness, dispatch overhead and requests per run,
measured on moto and the local cloud. It reports figures; it never asserts them."""
