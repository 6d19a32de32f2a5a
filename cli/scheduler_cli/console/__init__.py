"""The admin console: a web page served with its assets, for the local cloud at /console/
and for a deployed stack by `scheduler console`."""
