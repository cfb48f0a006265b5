/* crelay: a TCP relay in C, two blocking threads per connection and
 * TCP_NODELAY, with no runtime of its own: the least any proxy adds to a
 * request's latency on this machine (see scripts/relay/main.go and scripts/bench.sh
 * --relays). Usage: crelay LISTEN_IP PORT UP_IP PORT */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in up;

struct pair {
  int from, to;
};

static void *copy(void *arg) {
  struct pair *p = arg;
  static __thread char buf[65536];
  for (;;) {
    ssize_t n = read(p->from, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(p->to, buf + off, n - off);
      if (w <= 0) goto out;
      off += w;
    }
  }
out:
  shutdown(p->to, SHUT_WR);
  return NULL;
}

static void *conn(void *arg) {
  int c = (int)(long)arg, one = 1;
  int u = socket(AF_INET, SOCK_STREAM, 0);
  if (u < 0 || connect(u, (struct sockaddr *)&up, sizeof up) < 0) {
    perror("connect");
    close(c);
    if (u >= 0) close(u);
    return NULL;
  }
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct pair a = {c, u}, b = {u, c};
  pthread_t t;
  pthread_create(&t, NULL, copy, &a);
  copy(&b);
  pthread_join(t, NULL);
  close(c);
  close(u);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: crelay LISTEN_IP PORT UP_IP PORT\n");
    return 2;
  }
  struct sockaddr_in l = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  up.sin_family = AF_INET;
  up.sin_port = htons(atoi(argv[4]));
  if (inet_pton(AF_INET, argv[1], &l.sin_addr) != 1 || inet_pton(AF_INET, argv[3], &up.sin_addr) != 1) {
    fprintf(stderr, "crelay: bad address\n");
    return 2;
  }
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, (struct sockaddr *)&l, sizeof l) < 0 || listen(s, 128) < 0) {
    perror("crelay: listen");
    return 1;
  }
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) continue;
    pthread_t t;
    pthread_create(&t, NULL, conn, (void *)(long)c);
    pthread_detach(t);
  }
}
