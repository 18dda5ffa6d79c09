// libmosquitto (Debian's libmosquitto-dev): the MQTT client library `--publish` drives from cuff's event loop.
#include <mosquitto.h>
