/* Keep a program's listening sockets on loopback: an LD_PRELOAD interposer for bind().
 *
 * TFF's worker_binary binds [::]:PORT (every interface) and has no flag to choose the
 * address. With --unsafe-open-workers, where the network sandbox is unavailable, fedprune
 * (fedprune/workers/local.py) compiles this file once into a private cache folder
 * and starts worker_binary with LD_PRELOAD naming it. Every bind() to a wildcard address
 * then binds the matching loopback address instead:
 *
 *   AF_INET6  ::               -> ::1
 *   AF_INET6  ::ffff:0.0.0.0   -> ::ffff:127.0.0.1
 *   AF_INET   0.0.0.0          -> 127.0.0.1
 *
 * Any other address is passed on unchanged. fedprune still checks, from /proc, that every
 * socket the worker listens on is a loopback one, and stops it otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_function)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *address, socklen_t length) {
    static bind_function real_bind;
    if (real_bind == NULL) {
        real_bind = (bind_function)dlsym(RTLD_NEXT, "bind");
        if (real_bind == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    if (address != NULL && address->sa_family == AF_INET6 &&
        length >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, address, sizeof in6);
        if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr)) {
            in6.sin6_addr = in6addr_loopback;
            return real_bind(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
        if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr) && in6.sin6_addr.s6_addr[12] == 0 &&
            in6.sin6_addr.s6_addr[13] == 0 && in6.sin6_addr.s6_addr[14] == 0 &&
            in6.sin6_addr.s6_addr[15] == 0) {
            in6.sin6_addr.s6_addr[12] = 127;
            in6.sin6_addr.s6_addr[15] = 1;
            return real_bind(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    } else if (address != NULL && address->sa_family == AF_INET &&
               length >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in in4;
        memcpy(&in4, address, sizeof in4);
        if (in4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&in4, sizeof in4);
        }
    }
    return real_bind(fd, address, length);
}
