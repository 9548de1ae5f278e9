/* rt_send.c: example of include/lanes_rt.h, compiled and run by
 * rtclient's TestCExample. Usage: rt_send SOCKET IPV4 PORT COUNT
 * Sends COUNT datagrams with a 1 s deadline and one whose deadline has
 * passed, printing one line per decision. (The test checks the API, not
 * timing: with 20 ms, a loaded machine refused the first datagram as
 * unmeetable, its connection's thread not yet running.) */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>

#include "lanes_rt.h"

int main(int argc, char **argv)
{
	struct lanes_rt rt;
	struct sockaddr_in dst;
	struct lanes_rt_reply rep;
	char msg[200];
	int i, count, r;

	if (argc != 5) {
		fprintf(stderr, "usage: %s SOCKET IPV4 PORT COUNT\n", argv[0]);
		return 2;
	}
	if (lanes_rt_open(&rt, argv[1]) < 0) {
		perror("lanes_rt_open");
		return 1;
	}
	memset(&dst, 0, sizeof(dst));
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", argv[2]);
		return 2;
	}
	count = atoi(argv[4]);
	for (i = 0; i <= count; i++) {
		/* the last one: a deadline already in the past */
		uint64_t d = i < count ? lanes_rt_now() + 1000000000ull : lanes_rt_now() - 1000;
		snprintf(msg, sizeof(msg), "c-example %d", i);
		r = lanes_rt_send(&rt, 5, (struct sockaddr *)&dst, d, 0, msg, strlen(msg), &rep);
		if (r < 0) {
			perror("lanes_rt_send");
			return 1;
		}
		printf("%d %s %s depth=%u\n", i, r ? "admitted" : "refused", lanes_rt_reason_str(rep.reason), rep.depth);
	}
	lanes_rt_close(&rt);
	return 0;
}
