/*
 * causewayd: the gateway (design §1, §5, §7).
 *
 * gateway/main.c parses the command line and loads the configuration; the
 * run mode and the demo are implemented here (gateway.c and friends).
 */
#ifndef CW_GATEWAY_H
#define CW_GATEWAY_H

#include <stdbool.h>

#include <causeway/config.h>

/** Options of the run mode beyond the configuration file. */
struct cw_gateway_run_opts {
    /** Write "<network name> <uri>" lines, one per listening network, to
     *  this fd once every network is open (-1: none).  Tests and the demo
     *  use it to learn addresses chosen by the plugins (port 0). */
    int ready_fd;
    /** Log level given on the command line (-1: take the config's). */
    int log_level;
};

/**
 * Run the gateway in the foreground until SIGTERM/SIGINT (drain) or a
 * "drain" admin command.
 * @param[in] cfg          validated configuration (borrowed for the call).
 * @param[in] config_path  file re-read on SIGHUP / "reload" (may be NULL:
 *                         reload is then refused).
 * @param[in] opts         NULL for defaults.
 * @return process exit status: 0 after a drain, 1 on a start-up failure.
 */
int cw_gateway_main(const struct cw_config *cfg, const char *config_path,
                    const struct cw_gateway_run_opts *opts);

/**
 * The demo (causewayd --demo): an echo service on one fabric, a gateway
 * bridging it to a second fabric, a client there calling through proxy
 * addresses; prints what crossed where.
 * @param[in] dump  print the embedded configuration instead of running.
 * @return process exit status.
 */
int cw_gateway_demo(bool dump);

#endif /* CW_GATEWAY_H */
